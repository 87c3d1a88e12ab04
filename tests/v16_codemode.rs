//! pi 1.6.0's `codemode` tool under `--compat 1.6` (issue 25): scripts run in a worker child of
//! pith's binary; their tool calls are nested calls with their own events; the globals; the
//! store across scripts, resume and fork; abort and the memory limit; permission rules on
//! nested calls; older versions without the tool.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use support::anthropic::{reply, text, tool_call};
use support::fake_llm::{FakeLlm, Reply};
use support::{Pith, World, fake_rpc, fake_world};

/// A reply whose one tool call is a `codemode` script.
fn script(n: usize, id: &str, code: &str) -> Reply {
    let args = serde_json::to_string(&json!({ "code": code })).expect("json");
    reply(n, &[tool_call(id, "codemode", &[&args])])
}

fn start(world: &World, extra: &[&str]) -> Pith {
    let mut args = fake_rpc(&["--compat", "1.6", "--tools", "+codemode"]);
    args.extend_from_slice(extra);
    world.spawn(&args)
}

fn run(p: &mut Pith, message: &str) -> Vec<Value> {
    support::frames::run(p, "p1", message)
}

fn end_of<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    frames
        .iter()
        .find(|v| v["type"] == "tool_execution_end" && v["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_execution_end {id}: {frames:#?}"))
}

fn result_text(end: &Value) -> String {
    support::frames::joined_text(&end["result"]["content"])
}

/// The result text with the wall time made stable.
fn stable(text: &str) -> String {
    let re = text
        .split('\n')
        .map(|l| {
            if l.starts_with("Wall time ") {
                "Wall time <s> seconds"
            } else {
                l
            }
        })
        .collect::<Vec<_>>();
    re.join("\n")
}

fn without_durations(mut v: Value) -> Value {
    match &mut v {
        Value::Object(m) => {
            if m.contains_key("durationMs") {
                m.insert("durationMs".into(), json!("<d>"));
            }
            for x in m.values_mut() {
                *x = without_durations(x.take());
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = without_durations(x.take());
            }
        }
        _ => {}
    }
    v
}

fn two_turns(code: &str) -> (World, FakeLlm) {
    fake_world(vec![script(1, "cm", code), reply(2, &[text(&["done"])])])
}

#[test]
fn nested_calls_have_their_events_and_records() {
    let (world, _llm) = two_turns(
        "const a = await tools.read({path: 'a.txt'});\nconst w = await tools.write({path: 'b.txt', content: 'BBB\\n'});\ntext(a);\ntext(w);",
    );
    std::fs::write(world.cwd().join("a.txt"), "AAA\n").expect("write");
    let mut p = start(&world, &["--no-session"]);
    let f = run(&mut p, "go");
    let tool_frames: Vec<Value> = f
        .iter()
        .filter(|v| {
            v["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_execution"))
        })
        .cloned()
        .map(without_durations)
        .collect();
    let args = json!({"code": "const a = await tools.read({path: 'a.txt'});\nconst w = await tools.write({path: 'b.txt', content: 'BBB\\n'});\ntext(a);\ntext(w);"});
    let update = |calls: Value| {
        json!({"type":"tool_execution_update","toolCallId":"cm","toolName":"codemode","args":args,
            "partialResult":{"content":[],"details":{"calls":calls}}})
    };
    let read_running =
        json!({"id":"cm/?","name":"read","args":"{\"path\":\"a.txt\"}","status":"running"});
    let read_ok = json!({"id":"cm/1","name":"read","args":"{\"path\":\"a.txt\"}","status":"ok","durationMs":"<d>"});
    let write_running = json!({"id":"cm/?","name":"write","args":"{\"path\":\"b.txt\",\"content\":\"BBB\\n\"}","status":"running"});
    let write_ok = json!({"id":"cm/2","name":"write","args":"{\"path\":\"b.txt\",\"content\":\"BBB\\n\"}","status":"ok","durationMs":"<d>"});
    let end = &tool_frames[tool_frames.len() - 1];
    assert_eq!(
        stable(&result_text(end)),
        "Script completed\nWall time <s> seconds\nOutput:\n==> text 1/2 <==\nAAA\n==> text 2/2 <==\nSuccessfully wrote to b.txt"
    );
    let expected = vec![
        json!({"type":"tool_execution_start","toolCallId":"cm","toolName":"codemode","args":args}),
        update(json!([])),
        json!({"type":"tool_execution_start","toolCallId":"cm/1","toolName":"read","args":{"path":"a.txt"},"parentToolCallId":"cm"}),
        update(json!([read_running])),
        json!({"type":"tool_execution_end","toolCallId":"cm/1","toolName":"read",
            "result":{"content":[{"type":"text","text":"AAA\n"}],"structuredContent":"AAA\n"},
            "isError":false,"durationMs":"<d>","parentToolCallId":"cm"}),
        update(json!([read_ok])),
        json!({"type":"tool_execution_start","toolCallId":"cm/2","toolName":"write","args":{"path":"b.txt","content":"BBB\n"},"parentToolCallId":"cm"}),
        update(json!([read_ok, write_running])),
        json!({"type":"tool_execution_end","toolCallId":"cm/2","toolName":"write",
            "result":{"content":[{"type":"text","text":"Successfully wrote to b.txt"}]},
            "isError":false,"durationMs":"<d>","parentToolCallId":"cm"}),
        update(json!([read_ok, write_ok])),
    ];
    assert_eq!(tool_frames[..expected.len()], expected[..]);
    assert_eq!(
        end["result"]["details"],
        json!({"calls":[read_ok, write_ok]})
    );
    assert_eq!(tool_frames.len(), expected.len() + 1);
    // The toolResult message records the nested calls; the next request only has the output.
    let msg = &f
        .iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "toolResult")
        .expect("toolResult")["message"];
    assert_eq!(
        without_durations(msg["nestedCalls"].clone()),
        json!({"calls":[
            {"id":"cm/1","name":"read","status":"ok","arguments":{"path":"a.txt"},"durationMs":"<d>"},
            {"id":"cm/2","name":"write","status":"ok","arguments":{"path":"b.txt","content":"BBB\n"},"durationMs":"<d>"}],
            "complete":true})
    );
    assert_eq!(
        std::fs::read_to_string(world.cwd().join("b.txt")).expect("b"),
        "BBB\n"
    );
}

#[test]
fn every_global_and_the_failure_texts() {
    let code = r#"
text("plain");
text({a: 1});
console.log("log", 1, {b: 2});
console.error("err");
image("data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==");
const names = ALL_TOOLS.map(t => t.name).join(",");
const found = (await searchTools("write file content", {limit: 1})).map(t => t.name);
const described = await describeTool("bash");
text([names, found, typeof described, described.includes("declare const tools: { bash(args:"), await describeNamespace("none") === undefined].join(" "));
let m;
try { await models.classify({provider: "x", id: "y"}, {}); } catch (e) { m = e.message; }
text(m);
return 42;"#;
    let (world, _llm) = two_turns(code);
    let mut p = start(&world, &["--no-session"]);
    let f = run(&mut p, "go");
    let end = end_of(&f, "cm");
    assert_eq!(end["isError"], false);
    let content = end["result"]["content"].as_array().expect("content");
    let texts: Vec<&str> = content.iter().filter_map(|b| b["text"].as_str()).collect();
    assert_eq!(
        stable(texts[0]),
        "Script completed\nWall time <s> seconds\nOutput:\n"
    );
    assert!(
        texts[1]
            .starts_with("==> text 1/5 <==\nplain\n==> text 2/5 <==\n{\"a\":1}\n[Image saved to "),
        "{}",
        texts[1]
    );
    assert!(texts[1].ends_with(" (image/png, 16B)]"), "{}", texts[1]);
    assert_eq!(content[2]["type"], "image");
    assert_eq!(content[2]["mimeType"], "image/png");
    assert_eq!(
        texts[2],
        "==> text 3/5 <==\nread,bash,edit,write write string true true\n==> text 4/5 <==\nmodels.classify() is not supported by pith: it has no classifier or image models. Use the tools instead.\n==> text 5/5 <==\n42\n<console_output>\nlog 1 {\"b\":2}\nerr\n</console_output>"
    );
    // The saved image is a real file.
    let label = texts[1].rsplit("[Image saved to ").next().expect("label");
    let path = label.split(" (").next().expect("path");
    assert_eq!(std::fs::metadata(path).expect("image file").len(), 16);
    let _ = std::fs::remove_file(path);

    // exit() ends early and successfully; a thrown error keeps the partial output.
    let (world, _llm) = fake_world(vec![
        script(1, "a", "text('one');\nexit();\ntext('two');"),
        script(2, "b", "text('partial');\nnull.x;"),
        script(
            3,
            "c",
            "// @options: {\"max_output_tokens\": 5}\ntext('y'.repeat(100));",
        ),
        script(4, "d", "text(1)\n// @options: {}"),
        script(5, "e", "await new Promise(() => {});"),
        reply(6, &[text(&["done"])]),
    ]);
    let mut p = start(&world, &["--no-session"]);
    let f = run(&mut p, "go");
    assert_eq!(
        stable(&result_text(end_of(&f, "a"))),
        "Script completed\nWall time <s> seconds\nOutput:\none"
    );
    let b = end_of(&f, "b");
    assert_eq!(b["isError"], true);
    assert_eq!(
        stable(&result_text(b)),
        "Script failed\nWall time <s> seconds\nOutput:\npartial\nScript error:\nTypeError: cannot read property 'x' of null\n    at <anonymous> (codemode.js:2:1)\n\nNo tool calls were made."
    );
    let c = stable(&result_text(end_of(&f, "c")));
    assert!(
        c.starts_with("Script completed\nWall time <s> seconds\nOutput:\nWarning: truncated output (original token count: 25)\nTotal output lines: 1\n\nyyyyyyyyyy…20 tokens truncated…yyyyyyyyyy\n\n[Full output: "),
        "{c}"
    );
    let full = c
        .rsplit("[Full output: ")
        .next()
        .expect("full")
        .split(' ')
        .next()
        .expect("path");
    assert_eq!(
        std::fs::read_to_string(full).expect("spill"),
        "y".repeat(100)
    );
    let _ = std::fs::remove_file(full);
    assert_eq!(
        result_text(end_of(&f, "d")),
        "The // @options: line must be the first line of the input; found one on line 2"
    );
    assert_eq!(
        stable(&result_text(end_of(&f, "e"))),
        "Script failed\nWall time <s> seconds\nOutput:\nScript error:\nError: The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here.\n\nNo tool calls were made."
    );
}

#[test]
fn unknown_tools_get_a_did_you_mean_and_bash_resolves_to_its_structure() {
    let (world, _llm) = two_turns(
        "const r = await tools.bash({command: 'echo hi; exit 2'});\ntext(r.output + r.exit_code);\nawait tools.Bash({command: 'x'});",
    );
    let mut p = start(&world, &["--no-session"]);
    let f = run(&mut p, "go");
    let end = end_of(&f, "cm");
    assert_eq!(end["isError"], true);
    assert_eq!(
        stable(&result_text(end)),
        "Script failed\nWall time <s> seconds\nOutput:\nhi\n2\nScript error:\nTypeError: tools.Bash does not exist. Did you mean tools.bash? ALL_TOOLS lists every tool; searchTools(query) finds tools by topic. Check for a member with \"Bash\" in tools.\n    at <anonymous> (codemode.js:3:7)\n\nTool calls made before the failure (they are not undone): bash (error)"
    );
}

#[test]
fn a_permission_rule_blocks_a_nested_call() {
    let (world, _llm) = two_turns(
        "try { await tools.bash({command: 'rm -f keep.txt'}); } catch (e) { text('blocked: ' + e.message); }",
    );
    std::fs::write(world.cwd().join("keep.txt"), "k").expect("write");
    let mut p = start(
        &world,
        &[
            "--no-session",
            "--deny",
            "bash(rm *)",
            "--allow",
            "codemode",
        ],
    );
    let f = run(&mut p, "go");
    let nested = end_of(&f, "cm/1");
    assert_eq!(nested["parentToolCallId"], "cm");
    assert_eq!(nested["isError"], true);
    let denial = "Permission denied: the rule deny \"bash(rm *)\" blocks this bash call (command: rm -f keep.txt). Do not retry it; ask the user if it is needed.";
    assert_eq!(result_text(nested), denial);
    assert_eq!(
        stable(&result_text(end_of(&f, "cm"))),
        format!("Script completed\nWall time <s> seconds\nOutput:\nblocked: {denial}")
    );
    assert!(world.cwd().join("keep.txt").exists());
}

#[test]
fn store_survives_scripts_resume_and_forks_and_failures_do_not_write() {
    let (world, llm) = fake_world(vec![
        script(
            1,
            "s1",
            "store('k', {v: 1}); store('gone', 1); store('gone', undefined);",
        ),
        script(2, "s2", "store('k', 'lost'); throw new Error('no');"),
        script(3, "s3", "text(JSON.stringify([load('k'), load('gone')]));"),
        reply(4, &[text(&["done"])]),
        script(5, "s4", "text(JSON.stringify(load('k')));"),
        reply(6, &[text(&["done again"])]),
    ]);
    let session = world.tmp().join("s.jsonl");
    let session_arg = session.to_string_lossy().into_owned();
    let mut p = start(&world, &["--session", &session_arg]);
    let f = run(&mut p, "one");
    let appended: Vec<&Value> = f.iter().filter(|v| v["type"] == "entry_appended").collect();
    assert_eq!(appended.len(), 1, "{appended:#?}");
    assert_eq!(appended[0]["entry"]["type"], "custom");
    assert_eq!(appended[0]["entry"]["customType"], "codemode-store");
    assert_eq!(
        appended[0]["entry"]["data"],
        json!({"set":{"k":{"v":1}},"delete":["gone"]})
    );
    assert_eq!(
        stable(&result_text(end_of(&f, "s3"))),
        "Script completed\nWall time <s> seconds\nOutput:\n[{\"v\":1},null]"
    );
    drop(p);
    // Resumed: the store is read from the branch.
    let mut p = start(&world, &["--session", &session_arg]);
    let f = run(&mut p, "two");
    assert_eq!(
        stable(&result_text(end_of(&f, "s4"))),
        "Script completed\nWall time <s> seconds\nOutput:\n{\"v\":1}"
    );
    drop(p);
    assert_eq!(llm.requests().len(), 6);

    // A fork from the first user message leaves the store entry off the branch.
    let (world2, _llm2) = fake_world(vec![
        script(1, "w", "store('k', 1);"),
        reply(2, &[text(&["ok"])]),
        script(3, "r", "text(String(load('k')));"),
        reply(4, &[text(&["ok"])]),
    ]);
    let s2 = world2.tmp().join("f.jsonl");
    let s2_arg = s2.to_string_lossy().into_owned();
    let mut p = start(&world2, &["--session", &s2_arg]);
    run(&mut p, "first");
    let forks = p.call(json!({"type":"get_fork_messages"}), "g");
    let entry = forks["data"]["messages"][0]["entryId"].clone();
    let r = p.call(json!({"type":"fork","entryId":entry}), "f");
    assert_eq!(r["success"], true, "{r}");
    let f = run(&mut p, "second");
    assert_eq!(
        stable(&result_text(end_of(&f, "r"))),
        "Script completed\nWall time <s> seconds\nOutput:\nundefined"
    );
}

/// Processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("proc").flatten() {
        let Ok(n) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{n}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some(rest) = stat.rsplit(')').next() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) && fields[0] != "Z" {
            out.push(n);
        }
    }
    out
}

#[test]
fn abort_kills_a_busy_script_at_once() {
    let (world, _llm) = fake_world(vec![
        script(1, "busy", "text('before');\nwhile (true) {}"),
        reply(2, &[text(&["unused"])]),
    ]);
    let mut p = start(&world, &["--no-session"]);
    p.send(json!({"type":"prompt","id":"p1","message":"spin"}));
    p.recv_until(|v| v["type"] == "tool_execution_update" && v["toolCallId"] == "busy");
    // The worker is running the loop.
    let deadline = Instant::now() + Duration::from_secs(10);
    let worker = loop {
        if let Some(c) = children_of(p.pid()).first() {
            break *c;
        }
        assert!(Instant::now() < deadline, "no worker");
        std::thread::sleep(Duration::from_millis(10));
    };
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    p.send(json!({"type":"abort","id":"a"}));
    let f = p.recv_until(|v| v["type"] == "response" && v["id"] == "a");
    let took = asked.elapsed();
    assert!(
        took < Duration::from_millis(100),
        "abort answered after {took:?}"
    );
    let end = end_of(&f, "busy");
    assert_eq!(end["isError"], true);
    assert_eq!(
        stable(&result_text(end)),
        "Script failed\nWall time <s> seconds\nOutput:\nbefore\nScript error:\nScript aborted: This operation was aborted\n\nNo tool calls were made."
    );
    // The worker is gone (killed and reaped).
    let gone_by = Instant::now() + Duration::from_millis(500);
    while std::path::Path::new(&format!("/proc/{worker}")).exists() {
        assert!(Instant::now() < gone_by, "worker {worker} still there");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_memory_limit_stops_a_growing_script() {
    let (world, _llm) =
        two_turns("const a = [];\nwhile (true) a.push('x'.repeat(1000) + a.length);");
    let mut args = fake_rpc(&["--compat", "1.6", "--tools", "+codemode", "--no-session"]);
    args.push("--verbose");
    let mut cmd = world.command(&args);
    cmd.env("PITH_TEST_CODEMODE_MEMORY", "33554432");
    let mut p = Pith::spawn_cmd(cmd);
    let f = run(&mut p, "grow");
    let t = stable(&result_text(end_of(&f, "cm")));
    assert!(
        t.starts_with("Script failed\nWall time <s> seconds\nOutput:\nScript error:\nInternalError: out of memory"),
        "{t}"
    );
}

#[test]
fn a_timeout_kills_the_script_and_workers_are_limited() {
    let (world, _llm) = fake_world(vec![
        reply(
            1,
            &[
                tool_call(
                    "t1",
                    "codemode",
                    &[r#"{"code":"// @options: {\"timeout_ms\": 300}\nwhile(true){}"}"#],
                ),
                tool_call(
                    "t2",
                    "codemode",
                    &[r#"{"code":"// @options: {\"timeout_ms\": 2000}\ntext('second');"}"#],
                ),
            ],
        ),
        reply(2, &[text(&["done"])]),
    ]);
    let mut cmd = world.command(&fake_rpc(&[
        "--compat",
        "1.6",
        "--tools",
        "+codemode",
        "--no-session",
    ]));
    cmd.env("PI_CODEMODE_MAX_WORKERS", "1");
    let mut p = Pith::spawn_cmd(cmd);
    let f = run(&mut p, "two");
    assert_eq!(
        stable(&result_text(end_of(&f, "t1"))),
        "Script failed\nWall time <s> seconds\nOutput:\nScript error:\nScript timed out: Execution timed out after 300 ms\n\nNo tool calls were made."
    );
    // The second waited for the only worker, then ran.
    assert_eq!(
        stable(&result_text(end_of(&f, "t2"))),
        "Script completed\nWall time <s> seconds\nOutput:\nsecond"
    );
}

#[test]
fn declared_under_16_only() {
    let (world, llm) = fake_world(vec![reply(1, &[text(&["hi"])])]);
    let mut p = start(&world, &["--no-session"]);
    run(&mut p, "x");
    let body = support::frames::request_body(&llm, 0);
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["read", "bash", "edit", "write", "codemode"]);
    assert!(
        body["tools"][0]["description"]
            .as_str()
            .expect("d")
            .ends_with("\n\nCodemode: `tools.read(args)` resolves to `string | { data: string; mimeType: string; note: string; type: \"image\"; }`.")
    );
    // 0.87: an unknown tool, as before.
    let (world, llm) = fake_world(vec![reply(1, &[text(&["hi"])])]);
    let mut p = world.spawn(&fake_rpc(&[
        "--compat",
        "0.87",
        "--tools",
        "read,codemode",
        "--no-session",
    ]));
    run(&mut p, "x");
    let body = support::frames::request_body(&llm, 0);
    assert_eq!(body["tools"].as_array().expect("tools").len(), 1);
    assert!(
        p.stderr_lines()
            .iter()
            .any(|l| l.contains("Unknown tool \"codemode\"")),
        "{:?}",
        p.stderr_lines()
    );
}

#[test]
fn settings_enable_codemode_and_mode_only_hides_the_other_tools() {
    let (world, llm) = fake_world(vec![
        script(
            1,
            "cm",
            "const r = await tools.bash({command: 'echo hi'});\ntext(r.output);",
        ),
        reply(2, &[text(&["done"])]),
    ]);
    world.write_agent_file(
        "settings.json",
        r#"{"defaultTools": ["+codemode"], "codemode": {"mode": "only", "inlineBudget": 3000}}"#,
    );
    let mut p = world.spawn(&fake_rpc(&["--compat", "1.6", "--no-session"]));
    let f = run(&mut p, "go");
    let body = support::frames::request_body(&llm, 0);
    let tools = body["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "{tools:#?}");
    assert_eq!(tools[0]["name"], "codemode");
    let d = tools[0]["description"].as_str().expect("description");
    assert!(d.contains("\n\nNested tools:\n\n### `read`\n"), "{d}");
    assert!(
        d.contains(
            "declare const tools: { bash(args: {\n  // Shell command to execute\n  command: string;"
        ),
        "{d}"
    );
    // A nested bash: its start, the script's row, then bash's own updates, all in order.
    let order: Vec<String> = f
        .iter()
        .filter(|v| {
            v["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_execution"))
        })
        .map(|v| format!("{} {}", v["type"], v["toolCallId"]))
        .collect();
    assert_eq!(
        order[..5],
        [
            "\"tool_execution_start\" \"cm\"",
            "\"tool_execution_update\" \"cm\"",
            "\"tool_execution_start\" \"cm/1\"",
            "\"tool_execution_update\" \"cm\"",
            "\"tool_execution_update\" \"cm/1\"",
        ]
    );
    let first_bash_update = f
        .iter()
        .find(|v| v["type"] == "tool_execution_update" && v["toolCallId"] == "cm/1")
        .expect("bash update");
    assert_eq!(first_bash_update["parentToolCallId"], "cm");
    assert_eq!(
        stable(&result_text(end_of(&f, "cm"))),
        "Script completed\nWall time <s> seconds\nOutput:\nhi\n"
    );
}

#[test]
fn a_script_that_times_out_while_a_nested_call_waits_for_approval_lets_the_batch_end() {
    let (world, _llm) = two_turns(
        "// @options: {\"timeout_ms\": 400}\nawait Promise.all([tools.bash({command: 'echo 1 > one.txt'}), tools.bash({command: 'echo 2 > two.txt'})]);",
    );
    let mut p = start(&world, &["--no-session", "--confirm-tools", "bash"]);
    p.send(json!({"type":"prompt","id":"p1","message":"go"}));
    let f = p.recv_until(|v| v["type"] == "extension_ui_request");
    let ask = f.last().expect("dialog").clone();
    assert_eq!(ask["method"], "confirm");
    // The script's deadline passes while the first call waits for its answer.
    let f = p.recv_until(|v| v["type"] == "tool_execution_end" && v["toolCallId"] == "cm");
    let t = stable(&result_text(f.last().expect("end")));
    assert!(
        t.contains("Script error:\nScript timed out: Execution timed out after 400 ms\n\nTool calls made before the failure (they are not undone): bash (cancelled), bash (cancelled)"),
        "{t}"
    );
    // The answer comes late: nothing runs, and the run goes on to its end.
    p.send(json!({"type":"extension_ui_response","id":ask["id"],"confirmed":true}));
    let f = p.recv_until(|v| v["type"] == "agent_settled");
    assert!(
        !f.iter().any(|v| v["type"] == "extension_ui_request"),
        "{f:#?}"
    );
    assert!(!world.cwd().join("one.txt").exists());
    assert!(!world.cwd().join("two.txt").exists());
}
