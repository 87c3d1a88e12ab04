//! Auto-retry, driven through the real `pith` binary over pipes with a fake Anthropic server:
//! the event order of a retried run (as the reference's i_retry_529 / i2 / i3 transcripts),
//! exhaustion, errors that are not retried, cancelling the back-off with `abort_retry` / `abort`,
//! `retry-after` hints and `set_auto_retry false`. Back-off delays come from `settings.json`.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{kinds, messages, of_type, request_json};
use support::{Pith, World, fake_rpc, fake_world};

const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
const RATE_LIMITED: &str =
    r#"{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}"#;

/// A started fake server and a world whose settings.json is `settings`.
fn setup(replies: Vec<Reply>, settings: Value) -> (World, FakeLlm) {
    let (w, srv) = fake_world(replies);
    w.write_agent_file("settings.json", &settings.to_string());
    (w, srv)
}

fn spawn(w: &World) -> Pith {
    w.spawn(&fake_rpc(&["--no-session"]))
}

/// Send a prompt (id `p1`); return every frame up to and including `agent_settled`.
fn run(p: &mut Pith, text: &str) -> Vec<Value> {
    support::frames::run(p, "p1", text)
}

/// The request's `messages`, `cache_control` markers included.
fn request_messages(srv: &FakeLlm, i: usize) -> Value {
    request_json(srv, i)["messages"].clone()
}

fn error_reply(status: u16, body: &str) -> Reply {
    Reply::error(status, body)
}

#[test]
fn overloaded_then_success_follows_the_reference_event_order() {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["Recovered", " after", " retry."])),
        ],
        json!({"retry":{"baseDelayMs":50}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    assert_eq!(
        kinds(&frames),
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant!",
            "message_end:assistant!",
            "turn_end",
            "agent_end",
            "auto_retry_start",
            "agent_start",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "auto_retry_end",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    let err = format!("529 {OVERLOADED}");
    let ends = of_type(&frames, "message_end");
    assert_eq!(ends[1]["message"]["errorMessage"], err.as_str());
    assert_eq!(ends[1]["message"]["content"], json!([]));
    assert_eq!(
        *of_type(&frames, "auto_retry_start")[0],
        json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":50,"errorMessage":err})
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
    let agent_ends = of_type(&frames, "agent_end");
    assert_eq!(agent_ends[0]["messages"].as_array().unwrap().len(), 2);
    assert_eq!(agent_ends[1]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        agent_ends[1]["messages"][0]["content"],
        json!([{"type":"text","text":"Recovered after retry."}])
    );

    // The retry resends the same context: the prompt once, no error message.
    assert_eq!(srv.requests().len(), 2);
    let want = json!([{"role":"user","content":[{"type":"text","text":"Hello?","cache_control":{"type":"ephemeral"}}]}]);
    assert_eq!(request_messages(&srv, 0), want);
    assert_eq!(request_messages(&srv, 1), want);

    let msgs = messages(&mut p);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[1]["stopReason"], "stop");
}

#[test]
fn the_back_off_is_waited_before_the_retry() {
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["ok"])),
        ],
        json!({"retry":{"baseDelayMs":300}}),
    );
    let mut p = spawn(&w);
    // Measured from before the prompt: a true lower bound however late frames are read.
    let t = Instant::now();
    p.send(json!({"id":"p1","type":"prompt","message":"Hello?"}));
    let frames = p.recv_until(|v| v["type"] == "auto_retry_start");
    assert_eq!(frames.last().unwrap()["delayMs"], 300);
    let next = p.recv();
    assert_eq!(next["type"], "agent_start");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(4000),
        "{waited:?}"
    );
    p.recv_until(|v| v["type"] == "agent_settled");
}

#[test]
fn stream_error_then_500_then_success_as_in_i3() {
    let partial = format!(
        "{}event: error\ndata: {OVERLOADED}\n\n",
        text_sse(1, &["Partial", " text"])
            .split("event: content_block_stop")
            .next()
            .unwrap()
    );
    let mut plain = error_reply(500, "upstream exploded");
    plain.headers = vec![("content-type".into(), "text/plain".into())];
    let (w, srv) = setup(
        vec![
            Reply::sse(partial),
            plain,
            Reply::sse(text_sse(3, &["Clean", " answer."])),
        ],
        json!({"retry":{"baseDelayMs":50}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    let starts: Vec<Value> = of_type(&frames, "auto_retry_start")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(
        starts,
        vec![
            json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":50,"errorMessage":OVERLOADED}),
            json!({"type":"auto_retry_start","attempt":2,"maxAttempts":3,"delayMs":100,"errorMessage":"500 upstream exploded"}),
        ]
    );
    assert_eq!(
        of_type(&frames, "auto_retry_end")
            .into_iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec![json!({"type":"auto_retry_end","success":true,"attempt":2})]
    );
    let ends = of_type(&frames, "message_end");
    assert_eq!(
        ends[1]["message"]["content"],
        json!([{"type":"text","text":"Partial text"}])
    );
    assert_eq!(ends[1]["message"]["stopReason"], "error");
    assert_eq!(srv.requests().len(), 3);
    // Neither failed attempt is sent back to the model.
    assert_eq!(request_messages(&srv, 2), request_messages(&srv, 0));
    assert_eq!(request_messages(&srv, 2).as_array().unwrap().len(), 1);
}

#[test]
fn retries_exhausted_end_after_the_last_agent_end() {
    let (w, srv) = setup(
        vec![
            error_reply(429, RATE_LIMITED),
            error_reply(429, RATE_LIMITED),
            error_reply(429, RATE_LIMITED),
            Reply::sse(text_sse(4, &["not reached"])),
        ],
        json!({"retry":{"baseDelayMs":50,"maxRetries":2}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    assert_eq!(
        kinds(&frames),
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant!",
            "message_end:assistant!",
            "turn_end",
            "agent_end",
            "auto_retry_start",
            "agent_start",
            "turn_start",
            "message_start:assistant!",
            "message_end:assistant!",
            "turn_end",
            "agent_end",
            "auto_retry_start",
            "agent_start",
            "turn_start",
            "message_start:assistant!",
            "message_end:assistant!",
            "turn_end",
            "agent_end",
            "auto_retry_end",
            "agent_settled"
        ]
    );
    let err = format!("429 {RATE_LIMITED}");
    let starts = of_type(&frames, "auto_retry_start");
    assert_eq!(
        *starts[0],
        json!({"type":"auto_retry_start","attempt":1,"maxAttempts":2,"delayMs":50,"errorMessage":err})
    );
    assert_eq!(
        *starts[1],
        json!({"type":"auto_retry_start","attempt":2,"maxAttempts":2,"delayMs":100,"errorMessage":err})
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":false,"attempt":2,"finalError":err})
    );
    p.assert_quiet(Duration::from_millis(200));
    assert_eq!(srv.requests().len(), 3);
    // The context keeps the prompt and the last error only.
    let msgs = messages(&mut p);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["errorMessage"], err.as_str());
}

#[test]
fn the_attempt_counter_restarts_after_a_success() {
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["one"])),
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(4, &["two"])),
        ],
        json!({"retry":{"baseDelayMs":20,"maxRetries":5}}),
    );
    let mut p = spawn(&w);
    for _ in 0..2 {
        let frames = run(&mut p, "Hello?");
        let start = of_type(&frames, "auto_retry_start");
        assert_eq!(start.len(), 1, "{frames:#?}");
        assert_eq!(start[0]["attempt"], 1);
        assert_eq!(start[0]["maxAttempts"], 5);
        assert_eq!(start[0]["delayMs"], 20);
        assert_eq!(
            *of_type(&frames, "auto_retry_end")[0],
            json!({"type":"auto_retry_end","success":true,"attempt":1})
        );
    }
}

fn assert_not_retried(status: u16, body: &str) {
    let (w, srv) = setup(
        vec![
            error_reply(status, body),
            Reply::sse(text_sse(2, &["Fine", " now."])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Trigger");
    assert_eq!(
        kinds(&frames),
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant!",
            "message_end:assistant!",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    let err = format!("{status} {body}");
    assert_eq!(
        of_type(&frames, "message_end")[1]["message"]["errorMessage"],
        err.as_str()
    );
    p.assert_quiet(Duration::from_millis(150));
    assert_eq!(srv.requests().len(), 1);
    // The next prompt works and the failed exchange stays in the context (as i5_error_400).
    let frames = run(&mut p, "Again");
    assert!(of_type(&frames, "auto_retry_start").is_empty());
    let msgs = messages(&mut p);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(msgs[1]["errorMessage"], err.as_str());
    assert_eq!(msgs[3]["stopReason"], "stop");
}

#[test]
fn http_400_is_not_retried() {
    assert_not_retried(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: bad request from fake"}}"#,
    );
}

#[test]
fn http_401_is_not_retried() {
    assert_not_retried(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    );
}

/// Start a run that fails with 529 and a 5 s back-off; return once `auto_retry_start` is read.
fn in_back_off(p: &mut Pith) {
    p.send(json!({"id":"p1","type":"prompt","message":"Hello?"}));
    let frames = p.recv_until(|v| v["type"] == "auto_retry_start");
    assert_eq!(frames.last().unwrap()["delayMs"], 5000);
}

/// Send `cmd` during the back-off: expect its success response, the cancelled
/// `auto_retry_end`, then `agent_settled`, all well before the 5 s delay.
fn cancel_back_off(cmd: &str) {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["not reached"])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let mut p = spawn(&w);
    in_back_off(&mut p);
    let t = Instant::now();
    p.send(json!({"id":"c","type":cmd}));
    let mut frames = p.recv_until(|v| v["type"] == "agent_settled");
    if !frames.iter().any(|f| f["id"] == "c") {
        frames.push(p.response("c"));
    }
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    let mut k = kinds(&frames);
    let resp = format!("response:{cmd}");
    k.retain(|x| *x != resp);
    assert_eq!(k, ["auto_retry_end", "agent_settled"], "{frames:#?}");
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":false,"attempt":1,"finalError":"Retry cancelled"})
    );
    let r = frames.iter().find(|f| f["id"] == "c").unwrap();
    assert_eq!(
        *r,
        json!({"id":"c","type":"response","command":cmd,"success":true})
    );
    p.assert_quiet(Duration::from_millis(200));
    assert_eq!(srv.requests().len(), 1);
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["isStreaming"], false);
    // The error message left the context when the back-off began (spec 9, step 2) and stays
    // out of it with the retry cancelled, as in pi 0.73.1 (oracle: messageCount 1).
    let msgs = messages(&mut p);
    assert_eq!(msgs.len(), 1, "{msgs:#?}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(st["data"]["messageCount"], 1);
}

#[test]
fn abort_retry_during_the_back_off_cancels_promptly() {
    cancel_back_off("abort_retry");
}

#[test]
fn abort_during_the_back_off_cancels_promptly() {
    cancel_back_off("abort");
}

#[test]
fn abort_retry_when_no_retry_is_pending_is_a_no_op() {
    let (w, _srv) = setup(vec![], json!({}));
    let mut p = spawn(&w);
    assert_eq!(
        p.call(json!({"type":"abort_retry"}), "a"),
        json!({"id":"a","type":"response","command":"abort_retry","success":true})
    );
    p.assert_quiet(Duration::from_millis(100));
}

#[test]
fn retry_after_seconds_is_honoured() {
    let (w, _srv) = setup(
        vec![
            error_reply(429, RATE_LIMITED).header("retry-after", "1"),
            Reply::sse(text_sse(2, &["ok"])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let mut p = spawn(&w);
    let t = Instant::now();
    p.send(json!({"id":"p1","type":"prompt","message":"Hello?"}));
    let frames = p.recv_until(|v| v["type"] == "auto_retry_start");
    assert_eq!(
        *frames.last().unwrap(),
        json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":1000,
               "errorMessage":format!("429 {RATE_LIMITED}")})
    );
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_millis(4500),
        "{waited:?}"
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
}

#[test]
fn retry_after_ms_is_honoured() {
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED).header("retry-after-ms", "30"),
            Reply::sse(text_sse(2, &["ok"])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    assert_eq!(of_type(&frames, "auto_retry_start")[0]["delayMs"], 30);
    assert_eq!(of_type(&frames, "auto_retry_end")[0]["success"], true);
}

#[test]
fn set_auto_retry_false_disables_retry() {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["not reached"])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    assert_eq!(
        p.call(json!({"type":"set_auto_retry","enabled":false}), "ar")["success"],
        true
    );
    let frames = run(&mut p, "Hello?");
    let k = kinds(&frames);
    assert_eq!(
        &k[k.len() - 3..],
        ["turn_end", "agent_end", "agent_settled"]
    );
    assert!(!k.iter().any(|x| x.starts_with("auto_retry")), "{k:?}");
    p.assert_quiet(Duration::from_millis(150));
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn settings_can_disable_retry() {
    let (w, srv) = setup(
        vec![error_reply(529, OVERLOADED)],
        json!({"retry":{"enabled":false,"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    assert!(of_type(&frames, "auto_retry_start").is_empty());
    p.assert_quiet(Duration::from_millis(150));
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn error_messages_stay_in_the_session_file_after_a_retry() {
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["Recovered."])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let dir = w.dir.path().join("sessions");
    let mut p = w.spawn(&fake_rpc(&["--session-dir", dir.to_str().unwrap()]));
    run(&mut p, "Hello?");
    let st = p.call(json!({"type":"get_state"}), "s");
    let file = st["data"]["sessionFile"].as_str().unwrap().to_string();
    let kinds: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            format!(
                "{}{}",
                e["type"].as_str().unwrap(),
                match e["message"]["stopReason"].as_str() {
                    Some(s) => format!(":{s}"),
                    None => String::new(),
                }
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message",
            "message:error",
            "message:stop"
        ]
    );
    assert_eq!(st["data"]["messageCount"], 2);
    // The entries stay one chain (the error entry is the parent of the retried reply). A resumed
    // session shows the retried error again, as pi 0.73.1 does (oracle: messageCount 3 after
    // switch_session back); 0.87.1 leaves it out with a context_edit entry.
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[5]["parentId"], lines[4]["id"]);
    drop(p);
    let mut p = w.spawn(&["--mode", "rpc", "--session", &file]);
    let msgs = messages(&mut p);
    let stops: Vec<&str> = msgs
        .iter()
        .map(|m| m["stopReason"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(stops, ["-", "error", "stop"]);
    let st = p.call(json!({"type":"get_state"}), "s2");
    assert_eq!(st["data"]["messageCount"], 3);
}

#[test]
fn a_connection_cut_mid_stream_is_retried() {
    let (w, srv) = setup(
        vec![
            Reply::sse(text_sse(1, &["Partial", " text that never ends"]))
                .chunked(60, Duration::ZERO)
                .cut_after(300),
            Reply::sse(text_sse(2, &["Whole."])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    let starts = of_type(&frames, "auto_retry_start");
    assert_eq!(starts.len(), 1, "{frames:#?}");
    assert_eq!(starts[0]["attempt"], 1);
    let err = &of_type(&frames, "message_end")[1]["message"];
    assert_eq!(err["stopReason"], "error");
    assert_eq!(starts[0]["errorMessage"], err["errorMessage"]);
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
    assert_eq!(srv.requests().len(), 2);
}

#[test]
fn a_retry_after_a_tool_turn_resends_the_tool_exchange_once() {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut tool = text_sse(1, &["Running."]);
    let cut = tool.find("event: message_delta").unwrap();
    tool.truncate(cut);
    tool += &ev(
        "content_block_start",
        json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}),
    );
    tool += &ev(
        "content_block_delta",
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"echo ran\"}"}}),
    );
    tool += &ev(
        "content_block_stop",
        json!({"type":"content_block_stop","index":1}),
    );
    tool += &ev(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":2}}),
    );
    tool += &ev("message_stop", json!({"type":"message_stop"}));
    let (w, srv) = setup(
        vec![
            Reply::sse(tool),
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(3, &["Done."])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    // The tool ran once; the retry continues after it.
    assert_eq!(of_type(&frames, "tool_execution_start").len(), 1);
    assert_eq!(of_type(&frames, "auto_retry_start").len(), 1);
    assert_eq!(srv.requests().len(), 3);
    let sent = request_messages(&srv, 2);
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(sent, request_messages(&srv, 1));
    assert_eq!(sent[2]["content"][0]["type"], "tool_result");
    let msgs = messages(&mut p);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
}

#[test]
fn abort_during_the_retried_run_ends_the_retry_as_the_reference() {
    // Spec 9 step 4: the first non-error assistant message_end after a retry, even an aborted
    // one, ends the retry with success:true.
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["Slow", " reply"]))
                .chunked(40, Duration::ZERO)
                .stall_after(300, Duration::from_secs(5)),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let mut p = spawn(&w);
    p.send(json!({"id":"p1","type":"prompt","message":"Hello?"}));
    p.recv_until(|v| v["type"] == "auto_retry_start");
    p.recv_until(|v| v["type"] == "message_start" && v["message"]["role"] == "assistant");
    p.send(json!({"id":"ab","type":"abort"}));
    let mut frames = p.recv_until(|v| v["type"] == "agent_settled");
    if !frames.iter().any(|f| f["id"] == "ab") {
        frames.push(p.response("ab"));
    }
    let k = kinds(&frames);
    let pos = |s: &str| k.iter().position(|x| x == s).unwrap_or(usize::MAX);
    assert!(
        pos("message_end:assistant") < pos("auto_retry_end"),
        "{k:?}"
    );
    assert!(pos("auto_retry_end") < pos("agent_end"), "{k:?}");
    assert_eq!(
        of_type(&frames, "message_end")[0]["message"]["stopReason"],
        "aborted"
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
}

#[test]
fn the_attempt_counter_restarts_after_exhaustion() {
    let (w, _srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            error_reply(529, OVERLOADED),
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(4, &["ok"])),
        ],
        json!({"retry":{"baseDelayMs":20,"maxRetries":1}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "one");
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":false,"attempt":1,"finalError":format!("529 {OVERLOADED}")})
    );
    let frames = run(&mut p, "two");
    assert_eq!(of_type(&frames, "auto_retry_start")[0]["attempt"], 1);
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
}

#[test]
fn an_error_the_sdk_would_retry_silently_shows_as_an_auto_retry() {
    // The reference's SDK retried this one inside the HTTP layer (i6_sdk_retry); pith never
    // retries silently, so the host sees the retry events.
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED)
                .header("x-should-retry", "true")
                .header("retry-after-ms", "10"),
            Reply::sse(text_sse(2, &["Recovered", " silently."])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    assert_eq!(
        *of_type(&frames, "auto_retry_start")[0],
        json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":10,
               "errorMessage":format!("529 {OVERLOADED}")})
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
    assert_eq!(srv.requests().len(), 2);
}

#[test]
fn max_retries_zero_ends_at_once_with_attempt_zero() {
    // Spec 9 step 1: attempt 1 > maxRetries 0 → auto_retry_end{success:false, attempt:0}
    // right after agent_end, with no auto_retry_start.
    let (w, srv) = setup(
        vec![error_reply(529, OVERLOADED)],
        json!({"retry":{"baseDelayMs":20,"maxRetries":0}}),
    );
    let mut p = spawn(&w);
    let frames = run(&mut p, "Hello?");
    let k = kinds(&frames);
    assert_eq!(
        &k[k.len() - 3..],
        ["agent_end", "auto_retry_end", "agent_settled"]
    );
    assert_eq!(
        *of_type(&frames, "auto_retry_end")[0],
        json!({"type":"auto_retry_end","success":false,"attempt":0,"finalError":format!("529 {OVERLOADED}")})
    );
    assert!(of_type(&frames, "auto_retry_start").is_empty());
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn a_prompt_after_a_cancelled_retry_sends_both_prompts() {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["Answer."])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let mut p = spawn(&w);
    in_back_off(&mut p);
    p.send(json!({"id":"c","type":"abort_retry"}));
    p.recv_until(|v| v["type"] == "agent_settled");
    let frames = run(&mut p, "Again");
    assert!(of_type(&frames, "auto_retry_start").is_empty());
    assert_eq!(srv.requests().len(), 2);
    let sent = request_messages(&srv, 1);
    let texts: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(texts, ["Hello?", "Again"]);
}

/// The context pith keeps and the one it rebuilds from the session file, as pi 0.73.1 has them:
/// a failed reply leaves the live context when its retry starts (whether the retry then succeeds
/// or is cancelled) and is back in the context read from the file.
#[test]
fn the_context_rebuilt_from_the_file_around_retries_is_pis() {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["Recovered."])),
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(3, &["Not reached."])),
        ],
        json!({"retry":{"baseDelayMs":20}}),
    );
    let dir = w.dir.path().join("sessions");
    let mut p = w.spawn(&fake_rpc(&["--session-dir", dir.to_str().unwrap()]));
    let stops = |msgs: &[Value]| -> Vec<String> {
        msgs.iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    m["role"].as_str().unwrap_or("?"),
                    m["stopReason"].as_str().unwrap_or("-")
                )
            })
            .collect()
    };
    let rebuilt = |p: &mut Pith, tag: &str| -> (Vec<Value>, Value) {
        let st = p.call(json!({"type":"get_state"}), &format!("{tag}-s"));
        let file = st["data"]["sessionFile"].clone();
        let r = p.call(json!({"type":"new_session"}), &format!("{tag}-n"));
        assert_eq!(r["success"], true, "{r}");
        let r = p.call(
            json!({"type":"switch_session","sessionPath":file}),
            &format!("{tag}-w"),
        );
        assert_eq!(r["success"], true, "{r}");
        let count =
            p.call(json!({"type":"get_state"}), &format!("{tag}-c"))["data"]["messageCount"]
                .clone();
        (messages(p), count)
    };

    // A retried failure: left out live, back after the rebuild.
    run(&mut p, "Hello?");
    let live = messages(&mut p);
    assert_eq!(stops(&live), ["user:-", "assistant:stop"]);
    let (again, count) = rebuilt(&mut p, "a");
    assert_eq!(
        stops(&again),
        ["user:-", "assistant:error", "assistant:stop"]
    );
    assert_eq!([again[0].clone(), again[2].clone()], live[..]);
    assert_eq!(count, 3);

    // A failure whose retry is cancelled: out of the live context, in the file's.
    p.send(json!({"id":"p2","type":"prompt","message":"Again?"}));
    p.recv_until(|v| v["type"] == "auto_retry_start");
    let r = p.call(json!({"type":"abort_retry"}), "ar");
    assert_eq!(r["success"], true, "{r}");
    p.recv_until(|v| v["type"] == "agent_settled");
    let live = messages(&mut p);
    assert_eq!(
        stops(&live),
        ["user:-", "assistant:error", "assistant:stop", "user:-"]
    );
    let (again, count) = rebuilt(&mut p, "b");
    assert_eq!(
        stops(&again),
        [
            "user:-",
            "assistant:error",
            "assistant:stop",
            "user:-",
            "assistant:error"
        ]
    );
    assert_eq!(again[..4], live[..]);
    assert_eq!(count, 5);
    assert_eq!(srv.requests().len(), 3);
}

/// `get_state`, `get_session_stats` and `get_messages` after a 529, `auto_retry_start` and
/// `abort_retry`, then after `switch_session` back to the same file, as pi 0.73.1 and 0.87.1
/// answer them (oracle scenario: prompt "Hello?", 529, `abort_retry` during the back-off).
/// The failed reply stays out of the live context; the file keeps it: 0.73 shows it again once
/// the file is read, 0.87's `context_edit` entry keeps it out there too.
fn abort_retry_then_switch_back(compat: &str) {
    let (w, srv) = setup(
        vec![
            error_reply(529, OVERLOADED),
            Reply::sse(text_sse(2, &["not reached"])),
        ],
        json!({"retry":{"baseDelayMs":5000}}),
    );
    let is_087 = compat == "0.87";
    let dir = w.dir.path().join("sessions");
    let mut args = vec!["--session-dir", dir.to_str().unwrap()];
    if is_087 {
        args.extend(["--compat", "0.87"]);
    }
    let mut p = w.spawn(&fake_rpc(&args));
    in_back_off(&mut p);
    let r = p.call(json!({"type":"abort_retry"}), "ar");
    assert_eq!(
        r,
        json!({"id":"ar","type":"response","command":"abort_retry","success":true})
    );
    p.recv_until(|v| v["type"] == "agent_settled");
    let st = p.call(json!({"type":"get_state"}), "gs");
    let file = st["data"]["sessionFile"].as_str().unwrap().to_string();
    let sid = st["data"]["sessionId"].as_str().unwrap().to_string();
    let model = st["data"]["model"].clone();
    assert_eq!(model["id"], "fake-model");
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The session file: the failed reply stays (0.87 adds the context_edit that drops it).
    let shape: Vec<String> = lines
        .iter()
        .map(|e| {
            let role = e["message"]["role"].as_str().unwrap_or("");
            let stop = e["message"]["stopReason"].as_str().unwrap_or("");
            format!("{}:{role}:{stop}", e["type"].as_str().unwrap())
        })
        .collect();
    let mut want_shape = vec!["session::", "model_change::", "thinking_level_change::"];
    if is_087 {
        want_shape.push("message:system:");
    }
    want_shape.extend(["message:user:", "message:assistant:error"]);
    if is_087 {
        want_shape.push("context_edit::");
    }
    assert_eq!(shape, want_shape);
    let user_entry = lines
        .iter()
        .find(|e| e["message"]["role"] == "user")
        .unwrap();
    let failed_entry = lines
        .iter()
        .find(|e| e["message"]["stopReason"] == "error")
        .unwrap();
    if is_087 {
        let edit = lines.last().unwrap();
        assert_eq!(edit["targetId"], failed_entry["id"]);
        assert_eq!(edit["parentId"], failed_entry["id"]);
        assert_eq!(edit["replacement"], Value::Null);
    }
    let user = user_entry["message"].clone();
    let failed = failed_entry["message"].clone();
    assert_eq!(
        failed,
        json!({"role":"assistant","content":[],"api":"anthropic-messages","provider":"fake",
            "model":"fake-model","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,
            "totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
            "stopReason":"error","timestamp":failed["timestamp"],
            "errorMessage":format!("529 {OVERLOADED}")})
    );
    assert_eq!(
        user,
        json!({"role":"user","content":[{"type":"text","text":"Hello?"}],"timestamp":user["timestamp"]})
    );

    // What get_state, get_session_stats and get_messages answer (system messages of 0.87 shown
    // by their role: their text is the system prompt).
    let queries = |p: &mut Pith, tag: &str| -> (Value, Value, Vec<Value>) {
        let st = p.call(json!({"type":"get_state"}), &format!("{tag}-gs"));
        let mut ss = p.call(json!({"type":"get_session_stats"}), &format!("{tag}-ss"));
        // 0.87 estimates the context from pith's own system prompt (without pi's docs section).
        if is_087 {
            let usage = &mut ss["data"]["contextUsage"];
            assert!(usage["tokens"].as_u64().unwrap() > 0, "{usage}");
            usage["tokens"] = json!("<estimate>");
            usage["percent"] = json!("<estimate>");
        }
        let msgs = messages(p)
            .into_iter()
            .map(|m| {
                if m["role"] == "system" {
                    json!({"role":"system"})
                } else {
                    m
                }
            })
            .collect();
        (st, ss, msgs)
    };
    let state = |tag: &str, count: u64| {
        let mut data = json!({"model":model,"thinkingLevel":"medium","isStreaming":false,
            "isCompacting":false,"steeringMode":"one-at-a-time","followUpMode":"one-at-a-time",
            "sessionFile":file,"sessionId":sid,"autoCompactionEnabled":true,
            "messageCount":count,"pendingMessageCount":0});
        // pith's additions (docs/rpc.md), last.
        data["interruptMode"] = json!("wait");
        data["queuedMessageCount"] = json!(0);
        json!({"id":format!("{tag}-gs"),"type":"response","command":"get_state","success":true,
            "data":data})
    };
    let stats = |tag: &str, users: u64, assistants: u64, total: u64, usage: Value| {
        json!({"id":format!("{tag}-ss"),"type":"response","command":"get_session_stats",
            "success":true,"data":{"sessionFile":file,"sessionId":sid,"userMessages":users,
            "assistantMessages":assistants,"toolCalls":0,"toolResults":0,"totalMessages":total,
            "tokens":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0},"cost":0,
            "contextUsage":usage}})
    };
    let estimate = json!({"tokens":"<estimate>","contextWindow":200000,"percent":"<estimate>"});
    let two = json!({"tokens":2,"contextWindow":200000,"percent":0.001});

    let (st, ss, msgs) = queries(&mut p, "live");
    if is_087 {
        // pi 0.87.1: the system message and the prompt; the stats count the whole file.
        assert_eq!(st, state("live", 2));
        assert_eq!(ss, stats("live", 1, 1, 3, estimate.clone()));
        assert_eq!(msgs, [json!({"role":"system"}), user.clone()]);
    } else {
        // pi 0.73.1: the prompt only, and the stats count the live context.
        assert_eq!(st, state("live", 1));
        assert_eq!(ss, stats("live", 1, 0, 1, two.clone()));
        assert_eq!(msgs, std::slice::from_ref(&user));
    }

    let r = p.call(json!({"type":"switch_session","sessionPath":file}), "sw");
    assert_eq!(
        r,
        json!({"id":"sw","type":"response","command":"switch_session","success":true,
            "data":{"cancelled":false}})
    );
    let (st, ss, msgs) = queries(&mut p, "back");
    if is_087 {
        assert_eq!(st, state("back", 2));
        assert_eq!(ss, stats("back", 1, 1, 3, estimate));
        assert_eq!(msgs, [json!({"role":"system"}), user.clone()]);
    } else {
        // pi 0.73.1 shows the failed reply again once the file is read.
        assert_eq!(st, state("back", 2));
        assert_eq!(ss, stats("back", 1, 1, 2, two));
        assert_eq!(msgs, [user.clone(), failed.clone()]);
    }
    assert_eq!(srv.requests().len(), 1);
    // Nothing more was written to the file.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().lines().count(),
        lines.len()
    );
}

#[test]
fn abort_retry_leaves_the_failed_reply_out_of_the_live_context_073() {
    abort_retry_then_switch_back("0.73");
}

#[test]
fn abort_retry_leaves_the_failed_reply_out_of_the_live_context_087() {
    abort_retry_then_switch_back("0.87");
}
