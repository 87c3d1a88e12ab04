//! Run limits (issue 27) through the real binary on the offline `faux` provider: every limit in
//! print, json and rpc modes, the `run_limit_reached` event right before `agent_end`, the exit
//! codes (3 for a turn/tool-call/cost/repeat limit, 4 for the deadline), what the session
//! records, and that no limit means no new frame at all.

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::FAUX;
use support::World;
use support::frames::role_kinds as kinds;
use support::output::{stderr as err, stdout as out, stdout_lines as lines};

/// Runs pith in `w` with stdin closed; panics if it takes more than 10 s.
fn pith(w: &World, args: &[&str]) -> Output {
    w.output_within_10s(args)
}

fn args<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut v = FAUX.to_vec();
    v.extend_from_slice(more);
    v
}

fn script(w: &World, name: &str, turns: &[Value]) -> String {
    let path = w.dir.path().join(name);
    let text: String = turns.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("write script");
    path.to_str().expect("utf-8").to_string()
}

/// Every turn calls `bash` with the same command (a loop), then a final answer.
fn looping(w: &World, n: usize) -> String {
    let mut turns: Vec<Value> = (0..n)
        .map(|i| json!({"text": format!("turn {i}"), "toolCalls":[{"name":"bash","arguments":{"command":"echo x"}}]}))
        .collect();
    turns.push(json!({"text":"done"}));
    script(w, "loop.jsonl", &turns)
}

fn limit_events(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "run_limit_reached")
        .collect()
}

/// The `run_limit_reached` frame comes right before `agent_end`.
fn assert_limit_before_end(frames: &[Value], limit: &str, value: f64) -> Value {
    let k = kinds(frames);
    let at = k
        .iter()
        .position(|t| t == "run_limit_reached")
        .unwrap_or_else(|| panic!("no run_limit_reached in {k:?}"));
    assert_eq!(k[at + 1], "agent_end", "{k:?}");
    assert_eq!(limit_events(frames).len(), 1, "{k:?}");
    let f = limit_events(frames)[0].clone();
    assert_eq!(f["limit"], limit);
    assert_eq!(f["value"].as_f64(), Some(value));
    // Exactly these keys, in this order.
    let keys: Vec<&String> = f.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["type", "limit", "value", "used"]);
    f
}

fn tool_ends(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .collect()
}

fn requests(frames: &[Value]) -> usize {
    frames
        .iter()
        .filter(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant")
        .count()
}

#[test]
fn max_turns_in_json_and_print_modes() {
    let w = World::new();
    let s = looping(&w, 5);
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--max-turns",
            "2",
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    let frames = lines(&o);
    let f = assert_limit_before_end(&frames, "maxTurns", 2.0);
    assert_eq!(f["used"], 2);
    // Two requests, and the tools of the second ran: no third request started.
    assert_eq!(requests(&frames), 2);
    assert_eq!(tool_ends(&frames).len(), 2);
    assert_eq!(
        kinds(&frames)[kinds(&frames).len() - 5..],
        [
            "turn_end",
            "run_limit_reached",
            "agent_end",
            "agent_settled",
            "result"
        ]
    );
    let r = frames.last().expect("result");
    assert_eq!(r["subtype"], "max_turns");
    assert_eq!(
        (r["turns"].as_u64(), r["toolCalls"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(r["text"], "turn 1");
    assert!(err(&o).contains("pith: run limit reached: maxTurns 2 (used 2)"));

    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "-p",
            "go",
            "--faux-script",
            &s,
            "--max-turns",
            "3",
        ]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    assert_eq!(out(&o), "turn 2\n");
}

#[test]
fn exactly_n_tool_calls_run() {
    let w = World::new();
    // Two calls per turn: the limit of 3 falls inside the second batch.
    let s = script(
        &w,
        "calls.jsonl",
        &[
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"touch ran1"}},{"name":"bash","arguments":{"command":"touch ran2"}}]}),
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"touch ran3"}},{"name":"bash","arguments":{"command":"touch ran4"}}]}),
            json!({"text":"never"}),
        ],
    );
    for mode in [["--mode", "json"], ["-p", "--verbose"]] {
        for i in 1..=4 {
            let _ = std::fs::remove_file(w.cwd().join(format!("ran{i}")));
        }
        let mut a = args(&["--no-session", "--faux-script", &s, "--max-tool-calls", "3"]);
        a.extend_from_slice(&mode);
        a.push("go");
        let o = pith(&w, &a);
        assert_eq!(o.status.code(), Some(3), "{mode:?} stderr: {}", err(&o));
        // Exactly three commands ran; the fourth did not start.
        let ran: Vec<bool> = (1..=4)
            .map(|i| w.cwd().join(format!("ran{i}")).exists())
            .collect();
        assert_eq!(ran, [true, true, true, false], "{mode:?}");
        if mode[0] == "--mode" {
            let frames = lines(&o);
            let f = assert_limit_before_end(&frames, "maxToolCalls", 3.0);
            assert_eq!(f["used"], 3);
            let ends = tool_ends(&frames);
            assert_eq!(ends.len(), 4);
            // The refused call ends at once (before the third, still running).
            let refused: Vec<&&Value> = ends.iter().filter(|e| e["isError"] == true).collect();
            assert_eq!(refused.len(), 1);
            assert_eq!(refused[0]["toolCallId"], "faux_4_1");
            assert_eq!(
                refused[0]["result"]["content"][0]["text"],
                "Tool call not run: the run's maxToolCalls limit (3) was reached"
            );
            assert_eq!(requests(&frames), 2);
        }
    }
}

#[test]
fn the_nth_repeat_ends_the_run() {
    let w = World::new();
    let s = looping(&w, 6);
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--max-repeats",
            "3",
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    let frames = lines(&o);
    let f = assert_limit_before_end(&frames, "maxRepeats", 3.0);
    assert_eq!(f["used"], 3);
    let ends = tool_ends(&frames);
    assert_eq!(ends.len(), 3);
    // Two calls ran; the third identical one did not.
    assert_eq!(ends[1]["isError"], false);
    assert_eq!(ends[2]["isError"], true);
    assert_eq!(requests(&frames), 3);
}

#[test]
fn max_cost_counts_the_models_prices() {
    let w = World::new();
    // A priced offline model: $1000 per million input tokens, so 300 tokens cost $0.30.
    w.write_agent_file(
        "models.json",
        &json!({"providers":{"priced":{"baseUrl":"http://127.0.0.1:9","api":"faux","apiKey":"none",
            "models":[{"id":"priced-faux","name":"Priced","reasoning":false,"input":["text"],
            "contextWindow":100000,"maxTokens":1000,
            "cost":{"input":1000,"output":0,"cacheRead":0,"cacheWrite":0}}]}}})
        .to_string(),
    );
    let turn = |i: usize| json!({"text": format!("t{i}"), "usage":{"input":300,"output":0},"toolCalls":[{"name":"bash","arguments":{"command":format!("echo {i}")}}]});
    let s = script(&w, "cost.jsonl", &[turn(0), turn(1), turn(2), turn(3)]);
    let o = pith(
        &w,
        &[
            "--provider",
            "priced",
            "--model",
            "priced-faux",
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--max-cost",
            "0.5",
            "go",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    let frames = lines(&o);
    let f = assert_limit_before_end(&frames, "maxCostUsd", 0.5);
    let used = f["used"].as_f64().expect("used");
    assert!((used - 0.6).abs() < 1e-9, "{used}");
    assert_eq!(requests(&frames), 2);
}

#[test]
fn the_deadline_aborts_a_silent_tool_and_a_stream() {
    let w = World::new();
    let sleeping = script(
        &w,
        "sleep.jsonl",
        &[
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"sleep 5"}}]}),
            json!({"text":"never"}),
        ],
    );
    let t0 = Instant::now();
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &sleeping,
            "--deadline",
            "0.5",
            "go",
        ]),
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(4), "stderr: {}", err(&o));
    let frames = lines(&o);
    let f = assert_limit_before_end(&frames, "deadline", 500.0);
    assert!(f["used"].as_f64().expect("used") >= 500.0);
    // The tool was aborted as by `abort`; no further request started.
    let ends = tool_ends(&frames);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(requests(&frames), 1);

    let slow = script(
        &w,
        "slow.jsonl",
        &[json!({"text":"slow slow slow slow slow slow slow slow","delayMs":200})],
    );
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "-p",
            "go",
            "--faux-script",
            &slow,
            "--deadline",
            "0.3",
        ]),
    );
    assert_eq!(o.status.code(), Some(4), "stderr: {}", err(&o));
    assert!(
        err(&o).contains("pith: run limit reached: deadline 300"),
        "{}",
        err(&o)
    );
}

#[test]
fn settings_limits_and_the_flags_over_them() {
    let w = World::new();
    let s = looping(&w, 5);
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"limits":{"maxTurns":1,"maxToolCalls":10}}}).to_string(),
    );
    let o = pith(
        &w,
        &args(&["--no-session", "--mode", "json", "--faux-script", &s, "go"]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    assert_limit_before_end(&lines(&o), "maxTurns", 1.0);
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--max-turns",
            "2",
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    assert_limit_before_end(&lines(&o), "maxTurns", 2.0);
    // A bad limits object is a configuration error, before anything runs.
    w.write_agent_file(
        "settings.json",
        &json!({"pith":{"limits":{"maxTurn":1}}}).to_string(),
    );
    let o = pith(&w, &args(&["--no-session", "-p", "go"]));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(out(&o), "");
    assert!(
        err(&o).contains("settings.json: pith.limits: unknown key \"maxTurn\""),
        "{}",
        err(&o)
    );
}

#[test]
fn bad_limit_flags_are_usage_errors() {
    let w = World::new();
    for (flag, v) in [
        ("--max-turns", "0"),
        ("--max-tool-calls", "x"),
        ("--max-cost", "-1"),
        ("--deadline", "0"),
        ("--max-repeats", "1.5"),
    ] {
        let o = pith(&w, &args(&["--no-session", flag, v, "-p", "go"]));
        assert_eq!(o.status.code(), Some(2), "{flag} {v}");
        assert!(
            err(&o).starts_with(&format!("pith: {flag}: '{v}'")),
            "{}",
            err(&o)
        );
    }
}

#[test]
fn rpc_prompt_limits_apply_to_that_run_only() {
    let w = World::new();
    let s = looping(&w, 20);
    let mut p = w.spawn(&args(&["--mode", "rpc", "--faux-script", &s]));
    let r = p.call(
        json!({"type":"prompt","message":"go","limits":{"maxTurns":2}}),
        "1",
    );
    assert_eq!(r["success"], true);
    let frames = p.recv_until(|f| f["type"] == "agent_settled");
    let f = assert_limit_before_end(&frames, "maxTurns", 2.0);
    assert_eq!(f["used"], 2);
    let file = p.call(json!({"type":"get_state"}), "s")["data"]["sessionFile"]
        .as_str()
        .expect("session file")
        .to_string();
    // The session recorded everything that happened: both replies and both results.
    let text = std::fs::read_to_string(&file).expect("session");
    let roles: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"]["role"].as_str().unwrap_or("?").to_string())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "toolResult", "assistant", "toolResult"]
    );
    assert!(!text.contains("run_limit_reached"));

    // The next prompt starts a fresh tally with its own limits (the first's maxTurns is gone).
    let r = p.call(
        json!({"type":"prompt","message":"again","limits":{"maxRepeats":2,"deadlineMs":60000}}),
        "2",
    );
    assert_eq!(r["success"], true);
    let frames = p.recv_until(|f| f["type"] == "agent_settled");
    let f = assert_limit_before_end(&frames, "maxRepeats", 2.0);
    assert_eq!(f["used"], 2);

    // A bad limits object is refused with the key named; nothing runs.
    let r = p.call(
        json!({"type":"prompt","message":"x","limits":{"maxTurns":0}}),
        "3",
    );
    assert_eq!(r["success"], false);
    assert_eq!(
        r["error"],
        "prompt: field \"limits\": \"maxTurns\" must be an integer of at least 1"
    );
    p.assert_quiet(Duration::from_millis(200));
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn rpc_deadline_under_compat_087() {
    let w = World::new();
    let s = script(
        &w,
        "sleep.jsonl",
        &[
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"sleep 5"}}]}),
            json!({"text":"never"}),
        ],
    );
    let mut p = w.spawn(&args(&[
        "--mode",
        "rpc",
        "--no-session",
        "--compat",
        "0.87",
        "--faux-script",
        &s,
    ]));
    let t0 = Instant::now();
    let r = p.call(
        json!({"type":"prompt","message":"go","limits":{"deadlineMs":300}}),
        "1",
    );
    assert_eq!(r["success"], true);
    let frames = p.recv_until(|f| f["type"] == "agent_settled");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_limit_before_end(&frames, "deadline", 300.0);
    // The run ended as an abort ends it: no retry follows.
    let end = frames
        .iter()
        .find(|f| f["type"] == "agent_end")
        .expect("end");
    assert_eq!(end["willRetry"], false);
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn no_limit_no_new_frame() {
    let w = World::new();
    let s = looping(&w, 3);
    let o = pith(
        &w,
        &args(&["--no-session", "--mode", "json", "--faux-script", &s, "go"]),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", err(&o));
    let frames = lines(&o);
    assert!(limit_events(&frames).is_empty());
    assert_eq!(requests(&frames), 4);
    // A limit that is not reached adds nothing either.
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--max-turns",
            "10",
            "--deadline",
            "60",
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", err(&o));
    assert!(limit_events(&lines(&o)).is_empty());
}

#[test]
fn configuration_errors_exit_2_in_print_and_json_modes() {
    let w = World::new();
    for mode in [&["-p"][..], &["--mode", "json"]] {
        let mut a = vec!["--no-session", "--model", "no-such-model-anywhere"];
        a.extend_from_slice(mode);
        a.push("hi");
        let o = pith(&w, &a);
        assert_eq!(o.status.code(), Some(2), "{mode:?}: {}", err(&o));
        assert_eq!(out(&o), "");
        assert!(err(&o).contains("no-such-model-anywhere"), "{}", err(&o));
    }
    // rpc mode keeps pi's exit 1 for a start-up error.
    let o = pith(
        &w,
        &[
            "--mode",
            "rpc",
            "--no-session",
            "--model",
            "no-such-model-anywhere",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    // An unknown flag is 2 everywhere, as before.
    let o = pith(&w, &["--no-such-flag", "-p", "hi"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The result record: json mode's last line, and `--result-file` (atomically) in both modes.
#[test]
fn the_result_record_and_file() {
    let w = World::new();
    let s = script(
        &w,
        "ok.jsonl",
        &[
            json!({"text":"Looking.","usage":{"input":100,"output":10},"toolCalls":[{"name":"bash","arguments":{"command":"true"}}]}),
            json!({"text":"All done.","usage":{"input":120,"output":5}}),
        ],
    );
    let file = w.dir.path().join("out").join("result.json");
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    let file_s = file.to_str().expect("utf-8");
    let sessions = w.dir.path().join("sessions");
    let o = pith(
        &w,
        &args(&[
            "--session-dir",
            sessions.to_str().expect("utf-8"),
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--result-file",
            file_s,
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", err(&o));
    let frames = lines(&o);
    let header = &frames[0];
    let r = frames.last().expect("result").clone();
    let session_file = r["sessionFile"].as_str().expect("session file").to_string();
    assert!(
        std::path::Path::new(&session_file).exists(),
        "{session_file}"
    );
    let d = r["durationMs"].as_u64().expect("durationMs");
    assert_eq!(
        r,
        json!({"type":"result","subtype":"success","sessionId":header["id"],
            "sessionFile":session_file,"turns":2,"toolCalls":1,
            "usage":{"input":220,"output":15,"cacheRead":0,"cacheWrite":0,"totalTokens":235},
            "costUsd":0,"durationMs":d,"text":"All done."})
    );
    // The file holds the same line, and nothing else is left in its directory.
    let written = std::fs::read_to_string(&file).expect("result file");
    assert_eq!(
        written,
        format!("{}\n", out(&o).lines().last().expect("line"))
    );
    assert_eq!(
        std::fs::read_dir(file.parent().expect("dir"))
            .expect("dir")
            .count(),
        1
    );

    // Print mode: stdout is the answer only; the file says how it ended.
    let looped = looping(&w, 5);
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "-p",
            "go",
            "--faux-script",
            &looped,
            "--max-repeats",
            "2",
            "--result-file",
            file_s,
        ]),
    );
    assert_eq!(o.status.code(), Some(3), "stderr: {}", err(&o));
    assert_eq!(out(&o), "turn 1\n");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("result file")).expect("json");
    assert_eq!(r["subtype"], "max_repeats");
    assert_eq!(r["sessionFile"], Value::Null);
    assert_eq!(
        (r["turns"].as_u64(), r["toolCalls"].as_u64()),
        (Some(2), Some(1))
    );

    // A failed run: subtype error, with the error.
    let failing = script(&w, "fail.jsonl", &[json!({"error":"scripted failure"})]);
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &failing,
            "--result-file",
            file_s,
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(1), "stderr: {}", err(&o));
    let r = lines(&o).last().expect("result").clone();
    assert_eq!(r["subtype"], "error");
    assert_eq!(r["error"], "scripted failure");
    assert_eq!(r["text"], Value::Null);
    assert_eq!(
        std::fs::read_to_string(&file).expect("result file"),
        format!("{}\n", out(&o).lines().last().expect("line"))
    );
}

/// `ping` is answered at once, also in the middle of a stream, and says whether a run is active.
#[test]
fn ping_during_a_stream() {
    let w = World::new();
    let s = script(
        &w,
        "slow.jsonl",
        &[json!({"text":"one two three four five six seven eight nine ten","delayMs":100})],
    );
    let mut p = w.spawn(&args(&[
        "--mode",
        "rpc",
        "--no-session",
        "--faux-script",
        &s,
    ]));
    let r = p.call(json!({"type":"ping"}), "idle");
    assert_eq!(r["success"], true);
    assert_eq!(r["command"], "ping");
    assert_eq!(r["data"]["isStreaming"], false);
    assert!(r["data"]["uptimeMs"].as_u64().is_some());
    assert_eq!(
        p.call(json!({"type":"prompt","message":"go"}), "1")["success"],
        true
    );
    p.recv_until(|f| f["type"] == "message_update");
    let t0 = Instant::now();
    p.send(json!({"type":"ping","id":"busy"}));
    let before = p.recv_until(|f| f["id"] == "busy" || f["type"] == "agent_end");
    let r = before.last().expect("frame").clone();
    assert_eq!(
        r["id"], "busy",
        "ping answered only after the run: {before:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(r["data"]["isStreaming"], true);
    assert_eq!(
        r.as_object().expect("obj").keys().collect::<Vec<_>>(),
        ["id", "type", "command", "success", "data"]
    );
    p.recv_until(|f| f["type"] == "agent_settled");
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

/// `--heartbeat`: events while a silent tool runs, none once the run has settled;
/// `--heartbeat-file` touches a file instead.
#[test]
fn heartbeats_during_a_silent_sleep_tool() {
    let w = World::new();
    let s = script(
        &w,
        "sleep.jsonl",
        &[
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"sleep 1"}}]}),
            json!({"text":"done"}),
        ],
    );
    let mut p = w.spawn(&args(&[
        "--mode",
        "rpc",
        "--no-session",
        "--faux-script",
        &s,
        "--heartbeat",
        "0.2",
    ]));
    assert_eq!(
        p.call(json!({"type":"prompt","message":"go"}), "1")["success"],
        true
    );
    let frames = p.recv_until(|f| f["type"] == "agent_settled");
    let k = kinds(&frames);
    let start = k
        .iter()
        .position(|t| t == "tool_execution_start")
        .expect("start");
    let end = k
        .iter()
        .position(|t| t == "tool_execution_end")
        .expect("end");
    let beats: Vec<&Value> = frames.iter().filter(|f| f["type"] == "heartbeat").collect();
    let during = k[start..end].iter().filter(|t| *t == "heartbeat").count();
    assert!(during >= 3, "{k:?}");
    let b = beats[0];
    assert_eq!(
        b.as_object().expect("obj").keys().collect::<Vec<_>>(),
        [
            "type",
            "elapsedMs",
            "turns",
            "toolCalls",
            "tokens",
            "costUsd",
            "activity"
        ]
    );
    assert_eq!(b["activity"], "tool");
    assert_eq!(
        (b["turns"].as_u64(), b["toolCalls"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(b["tokens"].as_u64().expect("tokens") > 0);
    let ms: Vec<u64> = beats
        .iter()
        .map(|b| b["elapsedMs"].as_u64().expect("ms"))
        .collect();
    assert!(ms.windows(2).all(|w| w[0] < w[1]), "{ms:?}");
    // Idle: no more beats.
    p.assert_quiet(Duration::from_millis(600));
    let (status, _) = p.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));

    let file = w.dir.path().join("alive");
    let o = pith(
        &w,
        &args(&[
            "--no-session",
            "--mode",
            "json",
            "--faux-script",
            &s,
            "--heartbeat",
            "0.2",
            "--heartbeat-file",
            file.to_str().expect("utf-8"),
            "go",
        ]),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", err(&o));
    assert!(file.exists());
    assert!(!lines(&o).iter().any(|f| f["type"] == "heartbeat"));
}
